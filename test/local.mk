# test/: the Criterion suites run by `make check`.
