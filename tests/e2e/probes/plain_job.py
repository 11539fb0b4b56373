"""A plain PySpark application: ``python plain_job.py MASTER MARKER`` runs one task that
writes MARKER and prints JOB RAN. Given no Spark secret, an authenticated cluster refuses it."""

import sys

from pyspark.sql import SparkSession

master, marker = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.master(master).config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.parallelize([marker], 1).foreach(lambda m: open(m, "w").write("ran"))
print("JOB RAN")
spark.stop()
