# bench/: the ebizzy clone, the microbenchmarks and `make bench`.
