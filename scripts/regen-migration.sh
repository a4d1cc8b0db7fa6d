#!/usr/bin/env bash
# Regenerate the single initial migration from the models (only while nothing has shipped).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
rm -f scheduler/store/migrations/versions/0001_initial_schema.py
python3 -c "
from alembic import command
from scheduler.store.db import alembic_config
command.revision(alembic_config('sqlite:///$tmp/gen.db'), message='initial schema', autogenerate=True, rev_id='0001')
" >/dev/null
sed -i '/^Create Date:/d' scheduler/store/migrations/versions/0001_initial_schema.py
rm -rf "$tmp"
echo "regenerated scheduler/store/migrations/versions/0001_initial_schema.py"
