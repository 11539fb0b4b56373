"""A plain PySpark process, holding no Spark secret, asks a driver's RPC server for one of
its endpoints: ``python rpc_probe.py HOST PORT`` prints CONNECTED or REFUSED and why."""

import sys

from pyspark.sql import SparkSession

host, port = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.rpc.lookupTimeout", "15s").config("spark.rpc.askTimeout", "15s").getOrCreate())
rpc = spark.sparkContext._jsc.sc().env().rpcEnv()
try:
    ref = rpc.setupEndpointRefByURI(f"spark://BlockManagerMaster@{host}:{port}")
    print("CONNECTED", ref.toString())
except Exception as exc:  # noqa: BLE001 - py4j wraps the JVM's refusal
    print("REFUSED", " | ".join(ln for ln in str(exc).splitlines() if "Exception" in ln or "Caused" in ln)[:600])
spark.stop()
