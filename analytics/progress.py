"""Progress while Spark reads the offsets log: a driver thread polls Spark's status tracker and
reports how many segments are read, so a long read is never silent."""

from __future__ import annotations

import threading
from collections.abc import Callable

JOB_GROUP = "groupd-read"


class ReadProgress:
    """`with ReadProgress(spark, segments, progress): records.count()` reports
    `reading: k of n segments` each time k grows (checked every `interval` seconds), and once
    more at the end. A task reads one segment (analytics.source), so the scan stage of the jobs
    run inside the block is the one with `segments` tasks."""

    def __init__(self, spark, segments: int, progress: Callable[[str], None], interval: float = 1.0) -> None:
        self.sc = spark.sparkContext
        self.segments = segments
        self.progress = progress
        self.interval = interval
        self.reported = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="groupd-read-progress", daemon=True)

    def __enter__(self) -> ReadProgress:
        self.sc.setJobGroup(JOB_GROUP, "groupd analytics: reading the offsets log")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sc.setLocalProperty("spark.jobGroup.id", None)
        if exc[0] is None:
            self._report(self.segments)

    def read(self) -> int:
        """Segments read so far by the jobs of this block."""
        tracker = self.sc.statusTracker()
        done = 0
        for job in tracker.getJobIdsForGroup(JOB_GROUP):
            info = tracker.getJobInfo(job)
            for stage in (info.stageIds if info else ()):
                stage_info = tracker.getStageInfo(stage)
                if stage_info is not None and stage_info.numTasks == self.segments:
                    done = max(done, stage_info.numCompletedTasks)
        return done

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._report(self.read())

    def _report(self, done: int) -> None:
        if done > self.reported:
            self.reported = done
            self.progress(f"reading: {done} of {self.segments} segments")
