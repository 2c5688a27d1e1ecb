# A program with its own `conf`, `region`, `rb_erase`, ... linked statically with libtide.a
# (libtool's -static: the uninstalled src/.libs/libtide.a): both its names and tide's
# allocator must work (issue 14).
check_PROGRAMS += test/static_names
TESTS += test/static_names
test_static_names_SOURCES = test/static_names.c
test_static_names_CFLAGS = $(AM_CFLAGS) -O2 -g -fno-builtin
test_static_names_LDFLAGS = -no-install -static
test_static_names_LDADD = src/libtide.la $(PTHREAD_LIBS)
