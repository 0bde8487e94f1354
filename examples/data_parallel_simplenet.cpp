// DataParallel on SimpleNet, the seeds' first multi-GPU tutorial, on four simulated H100s:
//
//   model = nn.DataParallel(SimpleNet().to("cuda:0"))      # parameters on device_ids[0]
//   out = model(x)          # scatter x → replicate model → parallel_apply → gather on cuda:0
//   loss_fn(out, y).backward()                              # grads reduce-added onto cuda:0
//
// A batch of 30 is split 8, 8, 8, 6. Lesson 02 shows this in the visualizer.
#include <fmt/format.h>

#include "dpscope/data/dataloader.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/data_parallel.hpp"

int main() {
  using namespace dpscope;
  const HardwarePreset h100 = find_preset("h100-sxm");
  std::vector<Device> gpus;
  for (int i = 0; i < 4; ++i) gpus.push_back(Device::sim(i, h100));

  // SimpleNet: Linear(2, 32) → ReLU → Linear(32, 32) → ReLU → Linear(32, 3).
  DataParallel model(Sequential::mlp("2-32-32-3", gpus[0], /*seed=*/0), gpus);
  SGD optimizer(model.parameters(), {.lr = 0.05, .momentum = 0.9});
  CrossEntropyLoss loss_fn;
  auto data = make_dataset("blobs:600", /*seed=*/1);
  DataLoader loader(data, {.batch_size = 30, .shuffle = true, .seed = 0});

  double first = 0.0, last = 0.0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.set_epoch(epoch);
    double sum = 0.0;
    for (const Batch& batch : loader) {
      optimizer.zero_grad();
      const Tensor out = model.forward(batch.inputs, batch.indices);  // the batch stays on the host
      const float loss = loss_fn.forward(out, batch.targets.to(gpus[0])).item();
      model.backward(loss_fn.backward());
      optimizer.step();  // only device 0 holds the real parameters and optimizer state
      sum += loss;
    }
    const double mean = sum / static_cast<double>(loader.num_batches());
    if (epoch == 0) first = mean;
    last = mean;
    fmt::print("epoch {}  mean loss {:.4f}  ({} replicas per step)\n", epoch, mean, model.replicas_used());
  }
  for (const Device& g : gpus)
    fmt::print("{}: simulated {:.3f} ms, peak memory {}\n", g.name(), g.synchronize() / 1e6,
               format_bytes(g.memory().peak_bytes));
  return last < first ? 0 : 1;
}
