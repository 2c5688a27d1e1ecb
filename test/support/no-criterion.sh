#!/bin/sh
# SPDX-License-Identifier: MIT
# Stands in for tide's suites when configure did not find Criterion.
echo "tide's test suites need Criterion (libcriterion-dev); run ./bootstrap as root or install it, then re-run configure." >&2
exit 1
