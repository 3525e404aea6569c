"""tools/theano_docs.py (``make theano-docs``): what it reads of Sphinx's doctest report,
how it compares the two sides, and the configuration both run under."""

import numpy as np
import theano_docs

STARS = "*" * 70


def _report(*documents):
    parts = ["Results of doctest builder run on today\n=====\n"]
    for name, body in documents:
        parts.append(f"Document: {name}\n{'-' * (10 + len(name))}\n{body}\n")
    parts.append("Doctest summary\n===============\n")
    return "\n".join(parts)


FAILED_OUTPUT = f"""{STARS}
File "tutorial/a.txt", line 12, in default
Failed example:
    f(2)
Expected:
    array(4.0)
Got:
    array(5.0)
{STARS}
File "tutorial/a.txt", line 20, in grp
Failed example:
    import numpy
    g()
Exception raised:
    Traceback (most recent call last):
      File "<doctest grp[0]>", line 2, in <module>
    ValueError: first
    <BLANKLINE>
    During handling of the above exception, another exception occurred:
    theano_dag.graph.fg.MissingInputError: Undeclared input: x
{STARS}
1 items had failures:
   2 of   5 in default
7 tests in 2 items.
5 passed and 2 failed.
***Test Failed*** 2 failures.
"""

PASSED = """1 items passed all tests:
   4 tests in default
4 tests in 1 items.
4 passed and 0 failed.
Test passed.
"""

SETUP = """1 items passed all tests:
   1 tests in default
1 tests in 1 items.
1 passed and 0 failed.
1 failures in setup code
"""


def test_each_documents_examples_and_failures_are_read():
    got = theano_docs.parse_output(
        _report(("tutorial/a", FAILED_OUTPUT), ("library/b", PASSED), ("c", SETUP))
    )
    assert got == {
        "tutorial/a": {
            "tests": 7,
            "failures": {
                "tutorial/a.txt:12:default": "output differs",
                # the last exception raised, not the first
                "tutorial/a.txt:20:grp": (
                    "theano_dag.graph.fg.MissingInputError: Undeclared input: x"
                ),
            },
        },
        "library/b": {"tests": 4, "failures": {}},
        "c": {"tests": 1, "failures": {"c:setup": "1 failure(s) in setup code"}},
    }


def test_the_comparison_lists_theano_dags_own_failures_per_document():
    theano = {
        "a": {"tests": 7, "failures": {"a.txt:1:default": "output differs"}},
        "b": {"tests": 4, "failures": {}},
    }
    dag = {
        "a": {
            "tests": 7,
            "failures": {"a.txt:1:default": "TypeError: x", "a.txt:9:default": "output differs"},
        },
        "c": {"tests": 2, "failures": {}},
    }
    rows = theano_docs.compare({"theano": theano, "theano_dag": dag})
    assert rows == [
        {
            "document": "a",
            "tests": 7,
            "theano_failed": 1,
            "theano_dag_failed": 2,
            # an example failing on both sides is not theano_dag's own, whatever the reason
            "theano_dag_only": {"a.txt:9:default": "output differs"},
        },
        {
            "document": "b",
            "tests": 4,
            "theano_failed": 0,
            "theano_dag_failed": 0,
            "theano_dag_only": {},
        },
        {  # a document one side did not report counts as no examples, no failures there
            "document": "c",
            "tests": 2,
            "theano_failed": 0,
            "theano_dag_failed": 0,
            "theano_dag_only": {},
        },
    ]
    one = theano_docs.compare({"theano_dag": dag})
    assert [r["document"] for r in one] == ["a", "c"] and "theano_dag_only" not in one[0]


def test_the_configuration_is_the_doctest_builder_with_numpys_printing_of_theanos_time():
    conf = {}
    exec(theano_docs.CONF, conf)
    assert conf["extensions"] == ["sphinx.ext.doctest"]
    assert conf["source_suffix"] == {".txt": "restructuredtext"}
    before = np.get_printoptions()
    try:
        exec(conf["doctest_global_setup"], {})
        assert repr(np.array(4.0)) == "array(4.0)"  # as Theano's examples print it
    finally:
        np.set_printoptions(**before)
