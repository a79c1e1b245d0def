# bench_lib.sh — sourced by the benchmark scripts (bench_stream.sh, bench_dense_stream.sh,
# project_model.sh, project_k3.sh): dropping the page cache and measuring the disk the same way in each.

# df_drop_cache FILE: the whole page cache when allowed and DROP_ALL=1 (the default), else
# FILE's cached pages (posix_fadvise DONTNEED). Sets DROP to what was done.
df_drop_cache() {
    if [ "${DROP_ALL:-1}" = 1 ] && sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then DROP="drop_caches"; else
        /usr/bin/python3 -c 'import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$1"
        DROP="fadvise(DONTNEED) of the model"
    fi
}

# df_disk_bw FILE NS CNT: the page cache dropped, then NS parallel dd streams, each reading CNT
# 16 MiB O_DIRECT blocks from its own 1/NS of FILE; prints GB/s (3 decimals).
df_disk_bw() {
    df_drop_cache "$1"
    _sz=$(stat -c %s "$1"); _k=0; _t0=$(date +%s.%N)
    while [ $_k -lt "$2" ]; do
        dd if="$1" of=/dev/null bs=16M count="$3" skip=$(( (_sz / 16777216 / $2) * _k )) iflag=direct 2>/dev/null &
        _k=$((_k + 1))
    done
    wait
    echo "$_t0 $(date +%s.%N)" | awk -v b=$(($2 * $3 * 16777216)) '{printf "%.3f", b / ($2 - $1) / 1e9}'
}

# df_fio_bw FILE QD: the page cache dropped, then fio (when installed) reading FILE with io_uring,
# O_DIRECT, 8 MiB random reads at queue depth QD for 6 s (deltafin's own engine and request size:
# Q4_K expert parts of K2 geometry are 8.3 MB); prints GB/s (3 decimals), or 0 without fio.
df_fio_bw() {
    command -v fio >/dev/null 2>&1 || { echo 0; return; }
    df_drop_cache "$1"
    fio --name=df --filename="$1" --readonly --rw=randread --bs=8m --direct=1 --ioengine=io_uring \
        --iodepth="$2" --runtime=6 --time_based --size="$(stat -c %s "$1")" --output-format=terse \
        --terse-version=3 2>/dev/null | awk -F';' '{ printf "%.3f", $7 * 1024 / 1e9; found = 1 } END { if (!found) printf "0" }'
}
