# SPDX-License-Identifier: MIT
# src/: libtide itself.
lib_LTLIBRARIES += src/libtide.la
src_libtide_la_SOURCES = \
	src/util.h src/lock.h src/lock.c src/list.h \
	src/os.h src/os.c \
	src/rbtree.h src/rbtree.c \
	src/size_class.h \
	src/region.h src/region.c src/pagemap.h \
	src/freelist.h src/freelist.c \
	src/meta.h src/meta.c \
	src/extent.h src/extent_internal.h src/extent.c src/extent_dirty.c src/extent_huge.c \
	src/purge.h src/purge.c \
	src/guard.h src/guard.c \
	src/arena.h src/arena.c \
	src/tcache.h src/tcache.c \
	src/transfer.h src/transfer.c \
	src/background.h src/background.c \
	src/large.h src/large.c \
	src/prof.h src/prof_internal.h src/prof.c src/prof_math.c src/prof_stack.c src/prof_record.c src/prof_dump.c \
	src/conf.h src/conf.c \
	src/stats.h src/stats.c \
	src/report.h src/report.c \
	src/cxx.h src/cxx.c \
	src/check.h src/check.c \
	src/init.h src/init.c \
	src/malloc.c \
	src/control.c
nodist_src_libtide_la_SOURCES = src/size_class_table.h
tide_lib_cppflags = $(AM_CPPFLAGS) -I$(top_builddir)/src -I$(top_srcdir)/src $(TIDE_FAULT_CPPFLAGS) \
	$(TIDE_DEBUG_CPPFLAGS)
# The system-wide settings, read before TIDE_CONF (src/conf.c): configure's sysconfdir.
src_libtide_la_CPPFLAGS = $(tide_lib_cppflags) -DTIDE_CONF_FILE='"$(sysconfdir)/tide.conf"'
# -fasynchronous-unwind-tables (gcc's default on x86_64): a C++ exception thrown by a
# new-handler, or std::bad_alloc, passes through tide's frames by their unwind tables (cxx.c).
src_libtide_la_CFLAGS = $(AM_CFLAGS) -O2 -g -fvisibility=hidden -ftls-model=initial-exec -fno-tree-slp-vectorize \
	-fno-semantic-interposition -fno-plt -fno-builtin-malloc -fno-builtin-free \
	-fno-builtin-calloc -fno-builtin-realloc -fasynchronous-unwind-tables
# src/libtide.ver: tide_ names versioned (TIDE_0.1), the malloc family and C++'s operators
# unversioned, so that they replace libc's and libstdc++'s (the script says why).
src_libtide_la_LDFLAGS = -version-info 0:0:0 -Wl,-z,now -Wl,-z,relro -Wl,--version-script=$(srcdir)/src/libtide.ver
src_libtide_la_LIBADD = $(PTHREAD_LIBS)

# The size-class table is computed at build time.
noinst_PROGRAMS += src/gen_size_class_table
src_gen_size_class_table_SOURCES = src/gen_size_class_table.c
BUILT_SOURCES += src/size_class_table.h
CLEANFILES += src/size_class_table.h
src/size_class_table.h: src/gen_size_class_table$(EXEEXT)
	$(AM_V_GEN)src/gen_size_class_table$(EXEEXT) > $@.tmp && mv $@.tmp $@

# The `tide` wrapper: runs a program with the installed library preloaded.
bin_SCRIPTS += src/tide
CLEANFILES += src/tide
EXTRA_DIST += src/tide.in
src/tide: $(top_srcdir)/src/tide.in src/libtide.la Makefile
	$(AM_V_GEN)soname=`$(tide_soname)` && test -n "$$soname" && \
	sed -e 's|@libdir[@]|$(libdir)|g' -e "s|@soname[@]|$$soname|g" $(top_srcdir)/src/tide.in > $@.tmp && \
	chmod +x $@.tmp && mv $@.tmp $@
# The library's runtime name (libtide.so.0), as libtool named it for this system: the
# file the runtime package ships, which the wrapper preloads.
tide_soname = sed -n "s/^dlname='\(.*\)'$$/\1/p" src/libtide.la

# libtide.a holds one object whose internal names are local, so that a program linked
# statically sees only tide's API and the malloc family (tools/link_localized.sh).  It is
# the link command of libtide.la itself, so every relink and `make install` get the
# processed archive.
src_libtide_la_LINK = LD='$(LD)' OBJCOPY='$(OBJCOPY)' AR='$(AR)' RANLIB='$(RANLIB)' \
	$(SHELL) $(top_srcdir)/tools/link_localized.sh \
	$(LIBTOOL) $(AM_V_lt) --tag=CC $(AM_LIBTOOLFLAGS) $(LIBTOOLFLAGS) --mode=link $(CCLD) \
	$(src_libtide_la_CFLAGS) $(CFLAGS) $(src_libtide_la_LDFLAGS) $(LDFLAGS) -o $@
EXTRA_src_libtide_la_DEPENDENCIES = $(top_srcdir)/tools/link_localized.sh $(srcdir)/src/libtide.ver
EXTRA_DIST += tools/link_localized.sh src/libtide.ver
