"""The compiler: Arroyo SQL and UDFs in, a validated pipeline program (or diagnostics) out."""

from arroyo.compiler.compiler import Compiler, dataflow_graph

__all__ = ["Compiler", "dataflow_graph"]
