"""The local cluster demo (``hetsched demo``): the main job of the README.

* :mod:`streams.demo.procs`: child processes in their own process groups,
  stopped in order (SIGTERM, then SIGKILL after a grace period).
* :mod:`streams.demo.trace`: turns openb pod rows into ``TaskSubmitted``
  payloads with arrival times, thinned to the demo cluster.
* :mod:`streams.demo.tracker`: folds the events the demo reads back from
  Kafka into live numbers and the final report's measurements.
* :mod:`streams.demo.live`: the rich terminal view.
* :mod:`streams.demo.report`: the summary report (markdown and JSON).
* :mod:`streams.demo.runner`: the orchestration of all of the above.
"""
