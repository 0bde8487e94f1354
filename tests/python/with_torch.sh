#!/usr/bin/env bash
# Runs a Python test with a python3 that has PyTorch: $DPSCOPE_PYTHON, else the first python3 on PATH,
# else Debian's /usr/bin/python3 (python3-torch). None: exit 77 (ctest: skipped), saying so.
# Usage: with_torch.sh SCRIPT ARGS...
for py in "${DPSCOPE_PYTHON:-}" python3 /usr/bin/python3; do
  [[ -n $py ]] || continue
  if "$py" -c 'import torch' >/dev/null 2>&1; then exec "$py" "$@"; fi
  [[ -n ${DPSCOPE_PYTHON:-} ]] && break  # the one asked for has no torch: do not pick another
done
echo "SKIP: no python3 with PyTorch here (scripts/install-deps.sh installs python3-torch; or set DPSCOPE_PYTHON)"
exit 77
