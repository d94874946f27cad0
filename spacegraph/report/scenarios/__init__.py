"""The report scenarios; importing this package registers them (`spacegraph.report.registry.SCENARIOS`) in the
order the report shows them."""

from spacegraph.report.scenarios import build  # noqa: F401  (isort: skip: registration order)
from spacegraph.report.scenarios import act  # noqa: F401,I001
from spacegraph.report.scenarios import sampling  # noqa: F401,I001
from spacegraph.report.scenarios import replay  # noqa: F401,I001
from spacegraph.report.scenarios import frame_replay  # noqa: F401,I001
from spacegraph.report.scenarios import learning  # noqa: F401,I001
from spacegraph.report.scenarios import apex  # noqa: F401,I001
from spacegraph.report.scenarios import impala  # noqa: F401,I001
from spacegraph.report.scenarios import impala_learning  # noqa: F401,I001
from spacegraph.report.scenarios import central_inference  # noqa: F401,I001
from spacegraph.report.scenarios import multi_device  # noqa: F401,I001
from spacegraph.report.scenarios import overhead  # noqa: F401,I001
from spacegraph.report.scenarios import roofline  # noqa: F401,I001
from spacegraph.report.scenarios import learning_long  # noqa: F401,I001
