"""Running Theano's programs on theano_dag: the table from Theano's module names to
theano_dag's (``theano_names``) and the ``theano`` import alias built on it (``alias``,
installed by ``python -m theano_dag.compat install-theano-alias``)."""
