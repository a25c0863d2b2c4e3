# The settings of the test Airflow deployment, sourced by start.sh (and printed into
# $AIRFLOW_HOME/airflow.env for clients: the test fixtures and `airflow` CLI calls read that file).
# Every value can be overridden by the caller's environment.
#   AIRFLOW_HOME          the deployment's home: config, logs, dags/, work/, torchx-local/
#   AIRFLOW_API_PORT      api-server (REST API + execution API) on 127.0.0.1 (default 18080)
#   AIRFLOW_PG_PORT       its PostgreSQL cluster on 127.0.0.1 (default 15432)
#   AIRFLOW_DEPLOYMENT    the deployment's name (default `airflow`): its home, database folder and
#                         PID files are named after it, so two deployments (on other ports) can
#                         run side by side on one machine
AIRFLOW_DEPLOYMENT="${AIRFLOW_DEPLOYMENT:-airflow}"
AIRFLOW_HOME="${AIRFLOW_HOME:-$CI_STATE_DIR/$AIRFLOW_DEPLOYMENT}"
AIRFLOW_API_PORT="${AIRFLOW_API_PORT:-18080}"
AIRFLOW_PG_PORT="${AIRFLOW_PG_PORT:-15432}"
AIRFLOW_PG_DATA="${AIRFLOW_PG_DATA:-$CI_STATE_DIR/$AIRFLOW_DEPLOYMENT-pg}"
AIRFLOW_URL="http://127.0.0.1:$AIRFLOW_API_PORT"
export AIRFLOW_HOME
export AIRFLOW__CORE__DAGS_FOLDER="${AIRFLOW__CORE__DAGS_FOLDER:-$AIRFLOW_HOME/dags}"
# on sys.path of every Airflow process (triggers that tests define live here)
export AIRFLOW__CORE__PLUGINS_FOLDER="${AIRFLOW__CORE__PLUGINS_FOLDER:-$AIRFLOW_HOME/plugins}"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__EXECUTOR="${AIRFLOW__CORE__EXECUTOR:-LocalExecutor}"
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=True
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS=True
export AIRFLOW__CORE__FERNET_KEY="${AIRFLOW__CORE__FERNET_KEY:-dG9yY2h4LXN1aXRlLWFpcmZsb3ctdGVzdC1mZXJuZXQ=}"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="$AIRFLOW_URL/execution/"
# `airflow connections test` and the UI's Test button (off by default in Airflow)
export AIRFLOW__CORE__TEST_CONNECTION=Enabled
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="postgresql+psycopg2://postgres@127.0.0.1:$AIRFLOW_PG_PORT/airflow"
export AIRFLOW__API__HOST=127.0.0.1
export AIRFLOW__API__PORT="$AIRFLOW_API_PORT"
export AIRFLOW__API__BASE_URL="$AIRFLOW_URL"
export AIRFLOW__API__WORKERS=1
export AIRFLOW__API__SECRET_KEY="${AIRFLOW__API__SECRET_KEY:-torchx-suite-airflow-test-secret}"
export AIRFLOW__API_AUTH__JWT_SECRET="${AIRFLOW__API_AUTH__JWT_SECRET:-torchx-suite-airflow-test-jwt}"
export AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL=5
# a trigger's on_kill may take this long (the fault-1 test's trigger waits for the new try)
export AIRFLOW__TRIGGERER__ON_KILL_TIMEOUT=120
export AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT=600
export AIRFLOW__LOGGING__LOGGING_LEVEL=INFO
# the apps our DAGs start on the local scheduler, and their scratch folder (shared with tests)
export TORCHX_LOCAL_ROOT="${TORCHX_LOCAL_ROOT:-$AIRFLOW_HOME/torchx-local}"
export TORCHX_AF_WORK="${TORCHX_AF_WORK:-$AIRFLOW_HOME/work}"
