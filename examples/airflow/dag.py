# A nightly fine-tuning DAG whose training task runs in its own pod (KubernetesPodOperator,
# apache-airflow-providers-cncf-kubernetes 10.x). Nothing here names fairway's scheduler or a
# priority class: fairway recognises the operator's pod (label kubernetes_pod_operator=True) as
# one try of one task, a one-pod training gang, and puts the half GPU it asks for on `base`.
from datetime import datetime

from airflow import DAG
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from kubernetes.client import models as k8s

with DAG(dag_id="nightly_finetune", schedule="0 2 * * *", start_date=datetime(2026, 8, 1), catchup=False) as dag:
    KubernetesPodOperator(
        task_id="train",
        name="train",
        namespace="team-b",
        image="registry.local/finetune:1.4",
        cmds=["python", "train.py"],
        arguments=["--epochs", "3"],
        annotations={"fairway.dev/gpu-fraction": "0.5"},
        container_resources=k8s.V1ResourceRequirements(requests={"cpu": "4", "memory": "32Gi"}),
        retries=3,
    )
