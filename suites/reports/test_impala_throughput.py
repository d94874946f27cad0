"""The IMPALA throughput report's CartPole curve: both sides report the mean return of their last 100 episodes."""

from spacegraph.reports.impala_throughput import CURVE_POINTS, at, last_mean, markdown, record_episode_return


class _Chunk:
    def __init__(self, value):
        self.value = value

    def get_return(self):
        return self.value


def test_rllib_returns_are_whole_episodes_and_the_curve_averages_the_last_100(tmp_path):
    path = tmp_path / "returns.txt"
    # an episode that RLlib cut into chunks counts once, with the return of all its chunks
    record_episode_return(str(path), episode=_Chunk(30.0), prev_episode_chunks=[_Chunk(10.0), _Chunk(5.0)])
    record_episode_return(str(path), episode=_Chunk(500.0))
    returns = [float(x) for x in path.read_text().split()]
    assert returns == [45.0, 500.0]
    assert last_mean(returns) == 272.5
    assert last_mean([]) is None
    assert last_mean([float(i) for i in range(1, 151)]) == sum(range(51, 151)) / 100  # the last 100 only


def test_the_curve_table_reads_each_side_at_its_points():
    ours = [(10.0, 50.0, 1), (29.0, 300.0, 2), (95.0, 500.0, 3)]
    rllib = [(31.0, 200.0, 1), (61.0, 400.0, 2)]
    result = {"date": "d", "machine": "m", "commit": "c", "seconds": 15, "envs": {},
              "curves": {"curve_ours": {"curve": ours}, "curve_rllib": {"curve": rllib}}}
    text = markdown(result)
    assert [at(ours, t) for t in CURVE_POINTS] == [50.0, 300.0, 300.0, 300.0, 500.0, 500.0]
    assert "| ours | 50.0 | 300.0 | 300.0 | 300.0 | 500.0 | 500.0 |" in text
    assert "| RLlib | - | - | 200.0 | 400.0 | 400.0 | 400.0 |" in text
    assert "on_episode_end" in text
