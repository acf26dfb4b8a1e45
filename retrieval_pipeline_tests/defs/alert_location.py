"""A code location for the UI test of the alert sensor's tick list: the project's sensor, its record_alerts job and
the alert specs, with the alert log under the test's folder (``RETRIEVAL_TEST_ALERT_LOG``)."""

import os

import dagster as dg

from retrieval_pipeline.defs.assets.alerts import alert_specs, record_alerts_job
from retrieval_pipeline.defs.resources import AlertSinkResource
from retrieval_pipeline.defs.sensors import retrieval_alert_sensor

#: The location's name, in the test's workspace file and in the sensor page's URL.
LOCATION = "alert_location"

defs = dg.Definitions(
    assets=alert_specs,
    jobs=[record_alerts_job],
    sensors=[retrieval_alert_sensor],
    resources={"alerts": AlertSinkResource(log_path=os.environ.get("RETRIEVAL_TEST_ALERT_LOG", "/nonexistent/alerts.jsonl"))},
    executor=dg.in_process_executor,
)
