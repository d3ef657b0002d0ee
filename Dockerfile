# One image for every role: the simulator, the Locust master and the workers (see docker-compose.yml).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
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
# Locust web UI (master) and master/worker port.
EXPOSE 8089 5557
CMD ["locust", "-f", "locustfiles/vendors.py", "--help"]
