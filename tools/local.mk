# tools/: checks make check runs on the built tree.

# libtide.a and libtide.so define exactly the TIDE_EXPORT and TIDE_ALIAS names of src/.
TESTS += tools/check_exports.py
EXTRA_DIST += tools/check_exports.py
AM_TESTS_ENVIRONMENT += NM='$(NM)'; export NM;
