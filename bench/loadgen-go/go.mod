module groupd/bench/loadgen

go 1.21
