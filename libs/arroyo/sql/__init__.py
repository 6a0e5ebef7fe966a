"""Arroyo's SQL dialect: parsing, the catalog of tables, and planning onto Spark SQL."""
