"""The paper's benchmark workloads (CIFAR-10 CNN, WikiText-2 RNN LM, MNIST DCGAN).

``experiments.tasks.TASKS`` maps a task name to a :class:`experiments.tasks.Task`, which bundles
the model builder, data pipeline, search space, target metric and a pure-torch per-iteration
train/eval step.  ``experiments.data`` holds the dataset loaders (no torchvision).
"""
