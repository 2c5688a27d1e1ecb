# Tests of the ebizzy clone (bench/ebizzy).
