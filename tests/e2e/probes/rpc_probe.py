"""A plain PySpark process, holding no Spark secret, asks a driver's RPC server for one of
its endpoints: ``python rpc_probe.py HOST PORT`` prints ``TARGET CONNECTED`` or ``TARGET
REFUSED`` and why. Then, as the control that shows the probe can connect at all, it asks
its own driver (local mode, ``spark.authenticate`` off) the same way: ``SELF ...``."""

import sys

from pyspark.sql import SparkSession

from spadeopt.deploy.spark_session import JVM_OPTIONS

host, port = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
         .config("spark.rpc.lookupTimeout", "15s").config("spark.rpc.askTimeout", "15s").getOrCreate())
conf = spark.sparkContext.getConf()
rpc = spark.sparkContext._jsc.sc().env().rpcEnv()
for label, h, p in (("TARGET", host, port), ("SELF", conf.get("spark.driver.host"), conf.get("spark.driver.port"))):
    try:
        ref = rpc.setupEndpointRefByURI(f"spark://BlockManagerMaster@{h}:{p}")
        print(label, "CONNECTED", ref.toString(), flush=True)
    except Exception as exc:  # noqa: BLE001 - py4j wraps the JVM's refusal
        print(label, "REFUSED", " | ".join(ln for ln in str(exc).splitlines() if "Exception" in ln or "Caused" in ln)[:600],
              flush=True)
spark.stop()
