FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY scheduler ./scheduler
COPY integrations ./integrations
COPY templates ./templates
RUN pip install --no-cache-dir .
RUN useradd --system --create-home pacer && mkdir -p /app/var && chown pacer /app/var
USER pacer
EXPOSE 8080
CMD ["pacer", "serve"]
