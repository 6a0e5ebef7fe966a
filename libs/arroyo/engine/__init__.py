"""The Spark side: sessions, turning a pipeline program into streaming queries, running them."""
