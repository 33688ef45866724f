# gpuwatch agent image: `docker build -t gpuwatch:0.1.0 .` (docs/kubernetes.md).
# Stage 1 installs gpuwatch into a virtual environment exactly as the README does
# (`pip install .`); stage 2 copies only that environment: no pip cache, no build tools.
ARG PYTHON_IMAGE=python:3.12-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# Where pip finds packages, for this stage only and unset unless given: a mirror
# (--build-arg PIP_INDEX_URL=...) or a proxy's CA bundle mounted into the build
# (-v /etc/ssl/certs:/etc/ssl/certs:ro --build-arg PIP_CERT=...). Nothing of it reaches the
# final stage, which copies /opt/gpuwatch alone.
ARG PIP_INDEX_URL
ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# python3, not python: the official image has both in /usr/local/bin, a base made from
# Debian's python3 package only /usr/bin/python3.
RUN python3 -m venv /opt/gpuwatch
COPY pyproject.toml README.md ./
COPY src ./src
RUN /opt/gpuwatch/bin/pip install --no-cache-dir . \
    && /opt/gpuwatch/bin/gpuwatch --help > /dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="gpuwatch" \
      org.opencontainers.image.description="GPU utilization and idle-cost monitor" \
      org.opencontainers.image.licenses="Apache-2.0"
# NVML comes from the host driver, injected by the NVIDIA container runtime
# (runtimeClassName: nvidia, NVIDIA_DRIVER_CAPABILITIES=utility).
ENV PATH=/opt/gpuwatch/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility
RUN groupadd --system --gid 65532 gpuwatch \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin gpuwatch \
    && install -d -o 65532 -g 65532 /var/lib/gpuwatch
COPY --from=build /opt/gpuwatch /opt/gpuwatch
USER 65532:65532
EXPOSE 9842
ENTRYPOINT ["gpuwatch"]
CMD ["run"]
