// The seeds' single-GPU baseline, in dpscope's PyTorch vocabulary: a model on one (simulated) GPU,
// a DataLoader, and the classic zero_grad → forward → loss → backward → step loop.
//
//   model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64,
//   3)).to("cuda:0") for x, y in loader: x, y = x.to(dev), y.to(dev); opt.zero_grad(); loss_fn(model(x),
//   y).backward(); opt.step()
//
// Lesson 01 shows this loop in the visualizer; the multi-GPU examples start from it.
#include <fmt/format.h>

#include "dpscope/core/device.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"

int main() {
  using namespace dpscope;
  const Device gpu = Device::sim(0, find_preset("h100-sxm"));  // like torch.device("cuda:0")

  auto data = make_dataset("spirals:1024", /*seed=*/0);  // 2 features, 3 classes
  DataLoader loader(data, {.batch_size = 64, .shuffle = true, .seed = 0});
  auto model = Sequential::mlp("2-64-64-3", gpu, /*seed=*/0);  // parameters live on sim:0
  SGD optimizer(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  CrossEntropyLoss loss_fn;

  double first_loss = 0.0, last_loss = 0.0;
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    loader.set_epoch(epoch);
    double epoch_loss = 0.0;
    for (const Batch& batch : loader) {
      const Tensor x = batch.inputs.to(gpu);  // host → GPU copy over PCIe (simulated)
      const Tensor y = batch.targets.to(gpu);
      optimizer.zero_grad();
      const Tensor loss = loss_fn.forward(model->forward(x), y);
      model->backward(loss_fn.backward());
      optimizer.step();
      epoch_loss += loss.item();
    }
    epoch_loss /= static_cast<double>(loader.num_batches());
    if (epoch == 0) first_loss = epoch_loss;
    last_loss = epoch_loss;
    fmt::print("epoch {}  mean loss {:.4f}\n", epoch, epoch_loss);
  }
  fmt::print("simulated time on {}: {:.3f} ms; parameters use {} on the device\n", gpu.name(),
             gpu.synchronize() / 1e6, format_bytes(gpu.memory().bytes[0]));
  // The example is also a test: training must have made progress.
  return last_loss < 0.8 * first_loss ? 0 : 1;
}
