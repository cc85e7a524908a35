#!/bin/bash
# usage: run.sh VERSION NAME PORT MODE extra-args...   MODE = fail | ready
set -u
VER=$1; NAME=$2; PORT=$3; MODE=$4; shift 4
V=$HOME/.cache/autotune/engines/sglang-$VER
OUT=/work/cap/raw; mkdir -p $OUT
LOG=$OUT/$VER-$NAME.log
META=$OUT/$VER-$NAME.meta
ls /dev/shm > $OUT/$VER-$NAME.shm-before
if ss -ltn | grep -q ":$PORT "; then echo "port $PORT busy"; exit 1; fi
ARGS=(--model-path /work/wt-cls/configs/models/tiny-llama-cpu-1m --load-format dummy --skip-tokenizer-init --device cpu
  --host 127.0.0.1 --port $PORT --mem-fraction-static 0.3 --context-length 4096 --max-running-requests 4 --sleep-on-idle)
EXTRA=("$@")
if [ -n "${MFS:-}" ]; then ARGS[12]=$MFS; fi
CMD="SGLANG_USE_CPU_ENGINE=1 HF_HUB_OFFLINE=1 LD_LIBRARY_PATH=$V/nodriver setsid $V/bin/python -m sglang.launch_server ${ARGS[*]} ${EXTRA[*]}"
{ echo "version=$VER"; echo "cmd=$CMD"; echo "start=$(date -Is)"; } > $META
T0=$(date +%s)
SGLANG_USE_CPU_ENGINE=1 HF_HUB_OFFLINE=1 LD_LIBRARY_PATH=$V/nodriver setsid $V/bin/python -m sglang.launch_server "${ARGS[@]}" "${EXTRA[@]}" > $LOG 2>&1 &
PID=$!
PGID=$PID
echo "pid=$PID" >> $META
READY=0
for k in $(seq 1 240); do
  sleep 1
  if ! kill -0 $PID 2>/dev/null; then break; fi
  if curl -s -o /dev/null -w '%{http_code}' --max-time 2 http://127.0.0.1:$PORT/health 2>/dev/null | grep -q 200; then READY=1; break; fi
done
echo "ready=$READY after=$(( $(date +%s)-T0 ))s" >> $META
if [ $READY = 1 ]; then
  R=$(curl -s --max-time 60 -H 'Content-Type: application/json' -d '{"input_ids":[1000,2000,3000],"sampling_params":{"max_new_tokens":4}}' http://127.0.0.1:$PORT/generate)
  echo "generate=$R" >> $META
  sleep 3
fi
ALIVE=0; kill -0 $PID 2>/dev/null && ALIVE=1
echo "alive_before_stop=$ALIVE at=$(( $(date +%s)-T0 ))s" >> $META
kill -TERM -$PGID 2>/dev/null && echo "sent TERM to -$PGID" >> $META
for k in $(seq 1 30); do
  pgrep -g $PGID >/dev/null || break
  sleep 1
done
if pgrep -g $PGID >/dev/null; then kill -KILL -$PGID; echo "sent KILL to -$PGID" >> $META; sleep 1; fi
wait $PID; echo "rc=$?" >> $META
echo "end=$(date -Is)" >> $META
ls /dev/shm > $OUT/$VER-$NAME.shm-after
for f in $(comm -13 $OUT/$VER-$NAME.shm-before $OUT/$VER-$NAME.shm-after); do
  case $f in sem.mp-*|sglang_*)
    if grep -qs "/dev/shm/$f" /proc/[0-9]*/maps || ls -l /proc/[0-9]*/fd 2>/dev/null | grep -q "/dev/shm/$f"; then
      echo "kept /dev/shm/$f (in use by a live process)" >> $META
    else rm -f /dev/shm/$f && echo "removed /dev/shm/$f" >> $META; fi;;
  esac
done
ls /dev/shm > $OUT/$VER-$NAME.shm-final
cat $META
