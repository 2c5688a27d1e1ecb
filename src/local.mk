# src/: libtide itself.
lib_LTLIBRARIES += src/libtide.la
src_libtide_la_SOURCES = src/malloc.c
src_libtide_la_CFLAGS = $(AM_CFLAGS) -O2 -g -fvisibility=hidden -ftls-model=initial-exec \
	-fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc
src_libtide_la_LDFLAGS = -version-info 0:0:0 -Wl,-z,now
src_libtide_la_LIBADD = $(PTHREAD_LIBS)
