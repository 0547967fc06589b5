"""A vision training pipeline for Kubeflow Pipelines v2: preprocess -> train on 4 GPUs -> evaluate.

The same pipeline as ../kubeflow-pipelines, with a training step on four GPUs: the run that
pipeline admission is for. In a busy cluster, without it, preprocess runs for an hour and then
train waits for four GPUs; with spec.pipelineAdmission: Peak on the queue, the run waits,
suspended before its first pod, until four GPUs can follow; with Stages, the run starts at once
and train's four GPUs are held shortly before preprocess is expected to end (see README.md).

    pip install kfp kfp-kubernetes
    python pipeline.py                       # writes pipeline.yaml, the IR to upload
    kfp run create --experiment-name vision --package-file pipeline.yaml   # or the UI / Client

workflow.yaml next to this file is the Argo Workflow the KFP API server submits for a run of it.
"""

from kfp import compiler, dsl, kubernetes


@dsl.component(base_image="python:3.11-slim")
def preprocess(source: str) -> str:
    """Cleans and shards the raw images; returns where the dataset is."""
    dataset = source.rstrip("/") + "/shards"
    print(f"preprocessed {source} into {dataset}")
    return dataset


@dsl.component(base_image="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime")
def train(dataset: str, epochs: int) -> str:
    """Trains a ResNet-50 on four GPUs, checkpointing every epoch; returns the model's URI."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model_uri = dataset.rsplit("/", 1)[0] + "/models/resnet50"
    print(f"training on {device} for {epochs} epochs from {dataset}")
    return model_uri


@dsl.component(base_image="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime")
def evaluate(model: str) -> float:
    """Scores the model on the held-out set; half a GPU is plenty."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"evaluating {model} on {device}")
    return 0.0


@dsl.pipeline(name="vision-training", description="Preprocess, train on four GPUs, evaluate on half a GPU.")
def vision_training(source: str = "s3://datasets/images/raw", epochs: int = 10):
    prep = preprocess(source=source)
    prep.set_cpu_limit("4").set_memory_limit("16G")
    # How long preprocessing takes: with pipelineAdmission Stages, fairway holds train's GPUs
    # shortly before this runs out (without it, from earlier runs, else when preprocess ends).
    kubernetes.add_pod_annotation(prep, "fairway.dev/expected-duration", "45m")

    trained = train(dataset=prep.output, epochs=epochs)
    trained.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit("4")
    trained.set_cpu_limit("8").set_memory_limit("32G")

    scored = evaluate(model=trained.output)
    scored.set_cpu_limit("4").set_memory_limit("16G")
    kubernetes.add_pod_annotation(scored, "fairway.dev/gpu-fraction", "0.5")


if __name__ == "__main__":
    compiler.Compiler().compile(vision_training, "pipeline.yaml")
