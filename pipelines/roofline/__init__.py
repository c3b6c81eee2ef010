"""Physics: the hardware and model catalog and the roofline cost of prefill and decode steps."""

from pipelines.roofline.catalog import Catalog, CatalogError, load_catalog
from pipelines.roofline.deployment import Deployment

__all__ = ["Catalog", "CatalogError", "Deployment", "load_catalog"]
