# SPDX-License-Identifier: MIT
# test/stress/: many threads, short-lived threads, and the differential soak.
if HAVE_CRITERION
tide_stress_suites = test/stress/stress test/stress/churn
check_PROGRAMS += $(tide_stress_suites)
TESTS += $(tide_stress_suites)

# Threads allocating, freeing and reallocating across each other, beside giant blocks.
test_stress_stress_SOURCES = test/stress/stress.c $(tide_test_support)
test_stress_stress_CPPFLAGS = $(tide_test_cppflags)
test_stress_stress_CFLAGS = $(tide_test_cflags)
test_stress_stress_LDFLAGS = -no-install
test_stress_stress_LDADD = $(tide_test_ldadd)

# 10,000 short-lived threads: nothing leaks (an RSS bound).
test_stress_churn_SOURCES = test/stress/churn.c $(tide_test_support)
test_stress_churn_CPPFLAGS = $(tide_test_cppflags)
test_stress_churn_CFLAGS = $(tide_test_cflags)
test_stress_churn_LDFLAGS = -no-install
test_stress_churn_LDADD = $(tide_test_ldadd)
endif

# ---- the differential soak -----------------------------------------------------------------
#   make check                  runs it for $(SOAK_SECONDS) s split between configurations
#   make stress                 the soak alone, $(STRESS_SECONDS) s
SOAK_SECONDS = 60
STRESS_SECONDS = 300

check_PROGRAMS += test/stress/soak test/stress/soak_fault
test_stress_soak_SOURCES = test/stress/soak.c
test_stress_soak_CPPFLAGS = $(rel_cppflags)
test_stress_soak_CFLAGS = $(rel_cflags)
test_stress_soak_LDFLAGS = $(rel_ldflags)
test_stress_soak_LDADD = src/libtide.la $(PTHREAD_LIBS)

# The same against the check-only build, with the OS layer failing calls at random.
test_stress_soak_fault_SOURCES = test/stress/soak.c
test_stress_soak_fault_CPPFLAGS = $(rel_cppflags) -DSOAK_FAULTS
test_stress_soak_fault_CFLAGS = $(rel_cflags)
test_stress_soak_fault_LDFLAGS = $(rel_ldflags)
test_stress_soak_fault_LDADD = test/libtide_fault.la $(PTHREAD_LIBS)

TESTS += test/stress/soak.sh
EXTRA_DIST += test/stress/soak.sh

.PHONY: stress
stress: test/stress/soak$(EXEEXT)
	SOAK_BIN=test/stress/soak$(EXEEXT) $(SHELL) $(srcdir)/test/stress/soak.sh $(STRESS_SECONDS)
