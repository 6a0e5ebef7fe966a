# One image for every service: `arroyo <service>` picks which one a container runs.
FROM python:3.11-slim
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/arroyo
COPY pyproject.toml setup.py README.md ./
COPY libs ./libs
COPY services ./services
COPY cli ./cli
RUN pip install --no-cache-dir ".[engine]"
ENV ARROYO__DATA_DIR=/var/lib/arroyo
VOLUME /var/lib/arroyo
ENTRYPOINT ["arroyo"]
