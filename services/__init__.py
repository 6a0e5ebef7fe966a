"""The thin services: wiring and servicers only (logic lives in libs/arroyo)."""
