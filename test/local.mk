# test/: the Criterion suites run by `make check`.
include test/ebizzy.mk
include test/reliability.mk
include test/purge.mk
include test/remap.mk
include test/init.mk
