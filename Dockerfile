# OmniVoice ONNX on CPUs: the server (the page, the OpenAI-compatible door, MCP, Wyoming, /metrics)
# without PyTorch. docs/container.md says how to build and run it.
#
#   docker build -t omnivoice-onnx .
#   docker run -p 7860:7860 -v omnivoice-cache:/data omnivoice-onnx
#
# BASE: any image with Python >= 3.10 and its venv module (Debian's python3 + python3-venv will
# do: the tests make one with debootstrap). PIP_CERT: a CA bundle inside BASE for pip to trust,
# where the build reaches PyPI through a proxy of its own (empty: pip's own). EXTRAS: the package's
# extras (server,asr,ray for an image of Ray Serve replicas: docs/replicas.md).
ARG BASE=python:3.12-slim
FROM ${BASE}

ARG PIP_CERT=
ARG EXTRAS=server,asr
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The runtime and its server in a virtual environment of their own: no torch, no build tools.
COPY pyproject.toml README.md LICENSE /src/
COPY omnivoice_rt /src/omnivoice_rt
RUN if [ -z "$PIP_CERT" ]; then unset PIP_CERT; fi \
    && python3 -m venv /opt/omnivoice \
    && /opt/omnivoice/bin/pip install "/src[${EXTRAS}]" \
    && rm -rf /src \
    && useradd --create-home --uid 1000 omnivoice \
    && mkdir -p /data /voices \
    && chown omnivoice:omnivoice /data /voices

USER omnivoice
ENV PATH=/opt/omnivoice/bin:$PATH \
    HF_HOME=/data/huggingface \
    GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    GRADIO_ANALYTICS_ENABLED=False
# The models and the recogniser downloaded from the Hub, and the integer GEMM's cache
VOLUME ["/data"]
# The page, its API, /v1 and /metrics; Wyoming where OMNIVOICE_WYOMING=tcp://0.0.0.0:10200
EXPOSE 7860 10200
HEALTHCHECK --interval=30s --timeout=5s --start-period=300s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('GRADIO_SERVER_PORT', '7860'), timeout=4)"]
# Configured as the server is: its flags after the image's name, or its environment variables
ENTRYPOINT ["omnivoice-onnx-server"]
