# One image for every role: the simulator, the Locust master and the workers (see docker-compose.yml).
FROM python:3.11-slim
# No bytecode written at run time (the root filesystem may be read-only; the build compiles it); matplotlib's
# cache in /tmp (a writable volume in Kubernetes, a tmpfs in docker-compose).
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 MPLCONFIGDIR=/tmp/matplotlib
WORKDIR /app
COPY pyproject.toml README.md ./
COPY avv_core avv_core
COPY avv_harness avv_harness
COPY avv_sim avv_sim
COPY avv_scoring avv_scoring
RUN pip install -e .
COPY locustfiles locustfiles
COPY configs configs
COPY samples samples
RUN python -m compileall -q avv_core avv_harness avv_sim avv_scoring locustfiles
# An unprivileged user with a numeric id (Kubernetes' runAsNonRoot can only check a number). The code stays
# root's (read-only to it); /results is its own, so a new docker volume mounted there is writable.
RUN groupadd --gid 10001 avv \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin avv \
    && mkdir /results && chown 10001:10001 /results
USER 10001:10001
# Locust web UI (master), master/worker port, metrics (--avv-metrics-port).
EXPOSE 8089 5557 9646
CMD ["locust", "-f", "locustfiles/vendors.py", "--help"]
