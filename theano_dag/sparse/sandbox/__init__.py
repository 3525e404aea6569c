"""Theano's ``theano.sparse.sandbox``: sampling ops with sparse results (:mod:`.sp2`)."""
