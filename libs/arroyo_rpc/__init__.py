"""Generated from proto/arroyo_rpc (scripts/gen-proto); never edit by hand."""
