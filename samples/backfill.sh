#!/bin/sh
# Backfill of last week after an outage: every slot of task/settlement's
# schedule between the two times that has no run gets one (skip dates left
# out), oldest first, one after the other under concurrencyPolicy Forbid.
# Needs samples/business-days.yaml applied and the kubectl task plugin
# (make build; export PATH=$PWD/bin:$PATH).
set -eu
from=$(date -u -d '7 days ago 00:00' +%Y-%m-%dT%H:%M:%SZ)
to=$(date -u -d 'today 00:00' +%Y-%m-%dT%H:%M:%SZ)
kubectl task backfill settlement --from "$from" --to "$to" --wait --timeout 30m
kubectl get task settlement -o jsonpath='{.status.backfill}{"\n"}'
