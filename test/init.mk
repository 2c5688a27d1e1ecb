# Start-up from a library constructor, dlsym, the dynamic loader, TLS destructors.
if HAVE_CRITERION
check_LTLIBRARIES += test/libinit_lib.la
check_PROGRAMS += test/init_probe test/test_init
TESTS += test/test_init
endif
test_libinit_lib_la_SOURCES = test/init_lib.c
test_libinit_lib_la_LDFLAGS = -rpath /nowhere -avoid-version
test_init_probe_SOURCES = test/init_probe.c
# init_lib comes first so its constructor may run before tide's.
test_init_probe_LDADD = test/libinit_lib.la src/libtide.la -ldl
test_init_probe_LDFLAGS = -no-install
test_test_init_SOURCES = test/test_init.c
test_test_init_CPPFLAGS = $(AM_CPPFLAGS) $(CRITERION_CFLAGS) -DINIT_PROBE=\"$(abs_top_builddir)/test/init_probe\" \
	-DTIDE_LIB=\"$(abs_top_builddir)/src/.libs/libtide.so\"
test_test_init_LDADD = src/libtide.la $(CRITERION_LIBS)
test_test_init_LDFLAGS = -no-install
