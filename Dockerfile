# One image for every service: `arroyo <service>` picks which one a container runs.
#
# Two stages. The build stage has a JDK: it installs Arroyo, resolves the connector jars (Kafka,
# Avro, Delta, Iceberg...) from Maven Central and compiles Arroyo's own Java into a jar, all
# under the Python prefix (share/arroyo). The runtime stage has a JRE only and copies that
# prefix: a container needs no network and no JDK at run time (the engine finds the jar built
# for its sources and compiles nothing). scripts/image-check runs the same steps without a
# container engine, and tests/cluster/test_image.py runs a pipeline the way the image would.

FROM python:3.11-slim AS build
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        openjdk-17-jdk-headless \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/arroyo
COPY pyproject.toml setup.py README.md ./
COPY libs ./libs
COPY services ./services
COPY cli ./cli
RUN pip install --no-cache-dir ".[engine]" \
    && python -m arroyo.engine.jars

FROM python:3.11-slim
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
# The installed packages, the `arroyo` command, and share/arroyo: the resolved jars and ours.
COPY --from=build /usr/local /usr/local
ENV ARROYO__DATA_DIR=/var/lib/arroyo
VOLUME /var/lib/arroyo
ENTRYPOINT ["arroyo"]
