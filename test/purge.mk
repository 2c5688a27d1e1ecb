# Purge policies, decay, the idle purger, TIDE_CONF and statistics (test_purge.c),
# through test/probe run in fresh processes.
if HAVE_CRITERION
check_PROGRAMS += test/probe test/test_purge
TESTS += test/test_purge
endif
test_probe_SOURCES = test/probe.c
test_probe_LDADD = src/libtide.la $(PTHREAD_LIBS)
test_probe_LDFLAGS = -no-install
test_test_purge_SOURCES = test/test_purge.c
test_test_purge_CPPFLAGS = $(AM_CPPFLAGS) $(CRITERION_CFLAGS) -DPROBE_PATH=\"$(abs_top_builddir)/test/probe\" \
	-DTIDE_WRAPPER=\"$(abs_top_builddir)/src/tide\" -DTIDE_LIB=\"$(abs_top_builddir)/src/.libs/libtide.so\"
test_test_purge_LDADD = src/libtide.la $(CRITERION_LIBS)
test_test_purge_LDFLAGS = -no-install
