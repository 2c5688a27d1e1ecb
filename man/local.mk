# SPDX-License-Identifier: MIT
# man/: the manual pages tide(1) and tide(3), made from templates at build time.
# tide(3)'s list of TIDE_CONF keys is written by man/gen_conf_keys from the table
# src/conf.c parses TIDE_CONF with, so a key cannot be missing from the page; both pages
# get the version and the installation directories.  man/check_man.sh checks them.
nodist_man_MANS = man/tide.1 man/tide.3
CLEANFILES += man/tide.1 man/tide.3
EXTRA_DIST += man/tide.1.in man/tide.3.in

noinst_PROGRAMS += man/gen_conf_keys
man_gen_conf_keys_SOURCES = man/gen_conf_keys.c src/report.c

man_subst = sed -e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' \
	-e 's|@libdir[@]|$(libdir)|g' -e 's|@includedir[@]|$(includedir)|g' \
	-e 's|@sysconfdir[@]|$(sysconfdir)|g' \
	-e 's|@pkgconfigdir[@]|$(pkgconfigdir)|g' -e 's|@docdir[@]|$(docdir)|g'

man/tide.1: $(top_srcdir)/man/tide.1.in src/libtide.la Makefile
	$(AM_V_GEN)$(MKDIR_P) man && soname=`$(tide_soname)` && test -n "$$soname" && \
	$(man_subst) -e "s|@soname[@]|$$soname|g" $(top_srcdir)/man/tide.1.in > $@.tmp && mv $@.tmp $@
man/tide.3: $(top_srcdir)/man/tide.3.in man/gen_conf_keys$(EXEEXT) src/libtide.la Makefile
	$(AM_V_GEN)$(MKDIR_P) man && soname=`$(tide_soname)` && test -n "$$soname" && \
	$(man_subst) -e "s|@soname[@]|$$soname|g" $(top_srcdir)/man/tide.3.in | man/gen_conf_keys$(EXEEXT) > $@.tmp && \
	mv $@.tmp $@

# Neither `man --warnings` (groff) nor `mandoc -T lint` has a word to say about either
# page, tide(3) documents every key the built library lists for TIDE_CONF=help, and
# tide(1) every option `tide --help` shows.
TESTS += man/check_man.sh
EXTRA_DIST += man/check_man.sh
