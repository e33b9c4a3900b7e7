# syntax=docker/dockerfile:1
# DisentangledFlash Serve images (deploy/README.md: build, run, mount a checkpoint).
#
#   docker build -t dflash-serve:gpu .               GPU image (the default, last target):
#                                                    CUDA 13.0 on Ubuntu 24.04, sm_80/89/90
#   docker build --target cpu -t dflash-serve:cpu .  CPU-only image for machines without a GPU
#
# The build stages run the scripts CI runs on every commit (scripts/install-deps.sh,
# scripts/build.sh, scripts/collect-runtime.sh), so what the image does to build is tested even
# where no Docker engine runs. The runtime stages hold only the collected binaries and libraries,
# run as a non-root user, read the model from the /models volume and the configuration from
# /etc/dflash/server.yaml, overridable by flags and by FLAGS_* environment variables.

ARG CUDA_VERSION=13.0.0
ARG UBUNTU_VERSION=24.04

# ---- build stages ---------------------------------------------------------------------------

FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION} AS build-gpu
# The GPU generations the kernels are compiled for: A100 (80), L4/L40S/RTX 40 (89), H100/H200
# (90a: the sm_90a features of the warpgroup attention kernel), and sm_90 PTX for later GPUs.
ARG CUDA_ARCHITECTURES="80;89;90a-real;90-virtual"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
# The install step first, alone: its layer is reused until the package list changes.
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh --no-deploy-tools && rm -rf /var/lib/apt/lists/*
COPY . .
RUN DFLASH_BUILD_DIR=/build scripts/build.sh -DDFLASH_CUDA=ON -DDFLASH_BUILD_TESTS=OFF \
      "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" \
 && scripts/collect-runtime.sh /opt/dflash /build/bin/dflash-server /build/bin/dflash-cli \
      /build/bin/dflash-classify /build/lib/libdflash_sentencepiece_shim.so

FROM ubuntu:${UBUNTU_VERSION} AS build-cpu
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh --no-deploy-tools && rm -rf /var/lib/apt/lists/*
COPY . .
RUN DFLASH_BUILD_DIR=/build scripts/build.sh -DDFLASH_CUDA=OFF -DDFLASH_BUILD_TESTS=OFF \
 && scripts/collect-runtime.sh /opt/dflash /build/bin/dflash-server /build/bin/dflash-cli \
      /build/bin/dflash-classify /build/lib/libdflash_sentencepiece_shim.so

# ---- runtime images -------------------------------------------------------------------------
# Both carry the same settings; only the base and the build stage differ.
#   user 10001:10001  no login, owns nothing in the image: the binaries are root's and read-only
#   /models           the checkpoint volume (mount one at /models/model, read-only)
#   50051, 9464       gRPC, Prometheus metrics (/metrics)
#   SIGTERM           drains (health NOT_SERVING, in-flight requests finish, exit 0) within
#                     drain_grace_period (30 s): run with --stop-timeout=40 or more
#   HEALTHCHECK       the project's own gRPC health call (plaintext; with TLS on, pass
#                     --health-cmd with dflash-cli's --tls_ca to docker run)

FROM ubuntu:${UBUNTU_VERSION} AS cpu
COPY --from=build-cpu /opt/dflash /opt/dflash
COPY deploy/k8s/base/server.yaml /etc/dflash/server.yaml
ENV PATH=/opt/dflash/bin:$PATH LD_LIBRARY_PATH=/opt/dflash/lib
USER 10001:10001
VOLUME ["/models"]
EXPOSE 50051 9464
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD ["dflash-cli", "--target=127.0.0.1:50051", "--timeout=4s", "health"]
# --tryfromenv: FLAGS_set, FLAGS_backend, FLAGS_listen, FLAGS_metrics_listen in the environment
# override the file (e.g. -e FLAGS_set=models.0.name=nli,models.0.batching.max_batch_tokens=8192).
ENTRYPOINT ["dflash-server", "--config=/etc/dflash/server.yaml", \
            "--tryfromenv=set,backend,listen,metrics_listen"]

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION} AS gpu
COPY --from=build-gpu /opt/dflash /opt/dflash
COPY deploy/k8s/base/server.yaml /etc/dflash/server.yaml
# The runtime image's CUDA libraries stay on the path; NVIDIA_* make the container toolkit
# mount the driver (set by the base image, restated so that they survive a base change).
ENV PATH=/opt/dflash/bin:$PATH LD_LIBRARY_PATH=/opt/dflash/lib:/usr/local/cuda/lib64 \
    NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 10001:10001
VOLUME ["/models"]
EXPOSE 50051 9464
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD ["dflash-cli", "--target=127.0.0.1:50051", "--timeout=4s", "health"]
ENTRYPOINT ["dflash-server", "--config=/etc/dflash/server.yaml", \
            "--tryfromenv=set,backend,listen,metrics_listen"]
