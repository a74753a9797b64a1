"""The ClientApp entry Flower requires of a project; torchlet SuperNodes never run it."""

from flwr.clientapp import ClientApp

app = ClientApp()
