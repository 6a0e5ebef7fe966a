"""The web UI (``arroyo/api/web``) in a real headless Chromium, driven by Playwright."""
